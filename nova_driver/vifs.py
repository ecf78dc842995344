# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Neutron VIFs → VNF NICs: which bridge, which MAC, which tap name, which events to wait for.

Supported VIF types (what the hypervisor must do for each, as in Nova's libvirt driver):

``bridge``  a tap named ``vif['devname']`` plugged into ``vif['network']['bridge']`` (Neutron's
            Linux-bridge binding). The bridge must exist: it is created by the network's agent
            (or the operator), not by the driver.
``tap``     a tap named ``vif['devname']`` left unplugged: Neutron's agent wires it (the ``tap``
            binding of e.g. networking-calico and SR-IOV-less routed setups).
``ovs``     Neutron's ML2/OVS and OVN bindings (vnic_type ``normal``), through os-vif's ``ovs``
            plugin as in Nova's libvirt driver (``nova.network.os_vif_util.nova_to_osvif_vif``):

            * hybrid plug (``ovs_hybrid_plug``, ML2/OVS with the iptables firewall): os-vif
              makes the per-port Linux bridge ``qbr<port>`` and the veth pair ``qvb``/``qvo``
              with ``qvo`` in the integration bridge; the tap goes into ``qbr`` (a Linux bridge,
              as libvirt's ``<interface type='bridge'>``);
            * plain OVS (ML2/OVS with the openvswitch firewall, OVN): os-vif ensures the
              integration bridge (with the binding's ``datapath_type``); the tap becomes a port
              of it with ``iface-id`` (the port), ``attached-mac`` and ``vm-uuid`` external ids
              once it exists — what libvirt does for ``<virtualport type='openvswitch'>``, here
              the launch core's (:func:`fluidvim.vnf.netdev.attach`), so that cold and warm
              launches (tap renamed, then plugged) both do it.

            Unplugging (:func:`unplug`, on destroy) is os-vif's: it removes the OVS port, and
            for hybrid plug the veths and ``qbr``. Other vnic types (``direct``, …) are refused.

Anything else (``vhostuser``, …) is refused with VirtualInterfaceCreateException naming the
port. Linux-bridge plugging is the launch core's ioctl path (:func:`fluidvim.vnf.netdev.plug`):
the os-vif in this Nova (5.3.0) ships only the ``noop`` and ``ovs`` plugins — its Linux-bridge
plugin left with Neutron's linuxbridge driver — and for both bridge and tap VIFs the hypervisor
side (create the tap, enslave it) is ours anyway, exactly what libvirt does for
``<interface type='bridge'>``.

Tap names: Neutron's agents find a port's device by ``devname`` (``tap`` + the port id's first 11
characters), so the VNF's tap gets that name when the VIF has one. The launch core names taps
itself (``fv<vnf>n<i>``) unless the launch passes ``taps=`` (one name or None per NIC). Ports with
a devname and a MAC still get a warm shell when one of the same shape is ready (same kernel,
flavor memory and vCPUs, NIC count = number of VIFs = ``[vnf] pool_nics``): the launch core
renames the shell's taps to the devnames and tells the VNF its MACs in ``configure``. A devname
that already exists on the host is refused (BuildAbortException naming ``taps[i]``).
"""

from __future__ import annotations

import threading

import os_vif
from nova import exception
from nova.network import model as network_model, os_vif_util
from os_vif import objects as osv_objects
from oslo_log import log as logging

from fluidvim.vnf import spec as specmod

LOG = logging.getLogger(__name__)

SUPPORTED_TYPES = (network_model.VIF_TYPE_BRIDGE, network_model.VIF_TYPE_TAP,
                   network_model.VIF_TYPE_OVS)

_init_lock = threading.Lock()
_initialized = False


class Nic:
    """What one VIF becomes: a NIC of the VNF (``ovs``: the OVS external ids of a plain OVS
    port; ``osvif``: the os-vif VIF to plug and unplug, for ``ovs`` VIFs)."""

    __slots__ = ("bridge", "mac", "tap", "port_id", "ovs", "osvif")

    def __init__(self, bridge, mac, tap, port_id, ovs=None, osvif=None):
        self.bridge, self.mac, self.tap, self.port_id = bridge, mac, tap, port_id
        self.ovs, self.osvif = ovs, osvif

    def __repr__(self):
        return (f"Nic(port={self.port_id}, tap={self.tap}, bridge={self.bridge}, mac={self.mac}"
                f"{', ovs' if self.ovs else ''}{', hybrid' if self.is_hybrid else ''})")

    @property
    def is_hybrid(self) -> bool:
        return isinstance(self.osvif, osv_objects.vif.VIFBridge)


def initialize() -> None:
    """Load os-vif's plugins once (registers ``[os_vif_ovs]`` in nova.conf)."""
    global _initialized
    with _init_lock:
        if not _initialized:
            os_vif.initialize()
            _initialized = True


def _ovs_nic(instance_uuid: str, i: int, vif) -> Nic:
    port = vif.get("id")
    initialize()
    try:
        osvif = os_vif_util.nova_to_osvif_vif(vif)
    except Exception as e:  # noqa: BLE001 - nova raises several kinds for unconvertible VIFs
        raise exception.VirtualInterfaceCreateException(
            f"port {port} of {instance_uuid}: os-vif cannot plug this ovs VIF: {e}") from e
    if isinstance(osvif, osv_objects.vif.VIFBridge):              # hybrid plug
        return Nic(osvif.bridge_name, vif.get("address"), vif.get("devname") or osvif.vif_name,
                   port, osvif=osvif)
    if not isinstance(osvif, osv_objects.vif.VIFOpenVSwitch):
        raise exception.VirtualInterfaceCreateException(
            f"port {port} of {instance_uuid}: fluidvim plugs ovs VIFs of vnic_type normal only, "
            f"not {vif.get('vnic_type')!r} ({type(osvif).__name__})")
    bridge = osvif.network.bridge if "bridge" in osvif.network else None
    if not bridge:
        raise exception.VirtualInterfaceCreateException(
            f"port {port} of {instance_uuid} is an ovs VIF that names no integration bridge "
            f"(network_info[{i}]['network']['bridge'])")
    ids = {"iface-id": osvif.port_profile.interface_id, "vm-uuid": instance_uuid}
    return Nic(bridge, vif.get("address"), vif.get("devname") or osvif.vif_name, port, ids,
               osvif)


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
        if vtype == network_model.VIF_TYPE_OVS:
            nic = _ovs_nic(instance_uuid, i, vif)
            if not specmod._IFNAME_RE.fullmatch(nic.tap):
                raise exception.VirtualInterfaceCreateException(
                    f"port {port} of {instance_uuid}: devname {nic.tap!r} is not a valid "
                    "interface name (1-15 characters of A-Z a-z 0-9 _ . -)")
            nics.append(nic)
            continue
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


def plug(instance, nics) -> None:
    """os-vif's part of plugging, before the VNF starts: for hybrid plug the ``qbr`` bridge and
    the ``qvb``/``qvo`` veths into the integration bridge; for plain OVS the integration bridge
    itself (the tap is added by the launch core once it exists). Idempotent."""
    info = None
    for nic in nics:
        if nic.osvif is None:
            continue
        info = info or os_vif_util.nova_to_osvif_instance(instance)
        try:
            os_vif.plug(nic.osvif, info)
        except Exception as e:  # noqa: BLE001 - os-vif raises PlugException and ovsdbapp errors
            LOG.error("fluidvim: os-vif could not plug port %s of %s: %s", nic.port_id,
                      instance.uuid, e, instance=instance)
            raise exception.VirtualInterfaceCreateException(
                f"port {nic.port_id} of {instance.uuid}: os-vif plug failed: {e}") from e


def unplug(instance, network_info) -> None:
    """os-vif's part of unplugging (after the VNF is gone): removes the port from the
    integration bridge, and for hybrid plug the veths and ``qbr``. Errors are logged (like
    the libvirt driver's unplug_vifs with ignore_errors): a delete must not fail on them."""
    info = None
    for vif in network_info or []:
        if vif.get("type") != network_model.VIF_TYPE_OVS:
            continue
        initialize()
        try:
            osvif = os_vif_util.nova_to_osvif_vif(vif)
            if osvif is None:
                continue
            info = info or os_vif_util.nova_to_osvif_instance(instance)
            os_vif.unplug(osvif, info)
        except Exception as e:  # noqa: BLE001
            LOG.warning("fluidvim: os-vif could not unplug port %s of %s: %s", vif.get("id"),
                        instance.uuid, e, instance=instance)


def plug_events(network_info) -> list[tuple[str, str]]:
    """``network-vif-plugged`` events to wait for: VIFs Neutron reports down (``active`` False)
    will go up once their agent sees the tap; the rest are up already (or stale: do not block)."""
    return [("network-vif-plugged", vif["id"]) for vif in network_info or []
            if vif.get("active", True) is False
            and vif.get("vnic_type") != network_model.VNIC_TYPE_REMOTE_MANAGED]

