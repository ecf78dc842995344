# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The Nova zone's networks, fixed-MAC ports and VNF stats: what a stage-1 load probe with a
generator VNF needs there (evaluator/genprobe.py, issue 23 item 2).

* networks = Neutron networks with port security off, named ``fluidvim/<zone>/<name>``: the
  generator VNF sends frames with MACs and IPs Neutron never assigned (and the probe VNF forwards
  them), which port security (anti-spoofing) would drop. A Neutron without the ``port-security``
  extension (ML2's ``extension_drivers = port_security``) cannot make them: create_network says
  so. Each gets one subnet (``SUBNET_CIDR``, no DHCP, no gateway): the VNFs use no Neutron
  address, but Nova boots a server on a network only when it has a subnet. delete_network deletes
  a network with its subnet (Neutron refuses while ports are on it).
* ports    = a launch NIC with a fixed MAC gets a Neutron port of that MAC made by the zone
  (admin, or the network's owner, may set ``mac_address``), named after the server, listed in
  its metadata ``fluidvim_ports`` and deleted after the server (Nova only unbinds ports it did
  not create).
* stats    = the server's diagnostics up to compute microversion 2.47 (free-form: what the
  driver's ``get_diagnostics`` returns; 2.48 has a fixed model with no room for element
  counters), whose ``vnf_stats`` is the VNF's ``stats`` reply (nova_driver/driver.py).
  Nova's default policy allows diagnostics to admins only, as it does host pinning.
"""

from __future__ import annotations

from openstack import exceptions as osexc

from fluidvim.common.zonetypes import NETWORK_NAME_RE, NetworkInfo, ZoneError

META_PORTS = "fluidvim_ports"
DIAGNOSTICS_MICROVERSION = "2.47"        # the last one whose diagnostics are the driver's dict
PORT_SECURITY_EXT = "port-security"
SUBNET_CIDR = "10.93.0.0/24"             # genprobe's addresses; each network is its own L2


class NovaNetworks:
    """Mixed into :class:`~fluidvim.orchestrator.zones.nova.NovaZone` (uses its ``conn``,
    ``name`` and ``_fail``)."""

    def _net_prefix(self) -> str:
        return f"fluidvim/{self.name}/"

    def networks(self) -> list[NetworkInfo]:
        prefix = self._net_prefix()
        try:
            nets = list(self.conn.network.networks())
        except osexc.SDKException as e:
            raise self._fail("listing networks", e) from None
        return [NetworkInfo(id=n.id, name=n.name[len(prefix):], zone=self.name)
                for n in nets if (n.name or "").startswith(prefix)]

    def create_network(self, name: str) -> NetworkInfo:
        if not isinstance(name, str) or not NETWORK_NAME_RE.fullmatch(name):
            raise ZoneError(f"name: {name!r} is not a valid network name: use 1-63 letters, "
                            "digits, '_', '.' or '-', starting with a letter or digit")
        full = self._net_prefix() + name
        net = self._find_network(full)
        if net is None:
            self._need_port_security()
            try:
                net = self.conn.network.create_network(name=full, port_security_enabled=False)
            except osexc.SDKException as e:
                raise self._fail(f"creating network {full!r}", e) from None
        if not net.subnet_ids:
            try:
                self.conn.network.create_subnet(network_id=net.id, name=full, ip_version=4,
                                                cidr=SUBNET_CIDR, gateway_ip=None,
                                                is_dhcp_enabled=False)
            except osexc.SDKException as e:
                self.delete_network(net.id)
                raise self._fail(f"creating the subnet of network {full!r}", e) from None
        return NetworkInfo(id=net.id, name=name, zone=self.name)

    def delete_network(self, network_id: str) -> None:
        net = (self._find_network(network_id)
               or self._find_network(self._net_prefix() + network_id))
        if net is None:
            return
        if not (net.name or "").startswith(self._net_prefix()):
            raise ZoneError(f"zone {self.name}: network {network_id!r} ({net.name}) was not "
                            "created by this zone: delete it in Neutron")
        try:
            self.conn.network.delete_network(net.id, ignore_missing=True)
        except osexc.SDKException as e:
            raise self._fail(f"deleting network {net.name!r}", e) from None

    def _find_network(self, name_or_id: str):
        try:
            return self.conn.network.find_network(name_or_id, ignore_missing=True)
        except osexc.SDKException as e:
            raise self._fail(f"looking up network {name_or_id!r}", e) from None

    def _need_port_security(self) -> None:
        try:
            ext = self.conn.network.find_extension(PORT_SECURITY_EXT, ignore_missing=True)
        except osexc.SDKException as e:
            raise self._fail("listing Neutron's extensions", e) from None
        if ext is None:
            raise ZoneError(f"zone {self.name}: Neutron has no {PORT_SECURITY_EXT} extension, so "
                            "networks cannot have port security off (a generator VNF's frames "
                            "carry addresses Neutron did not assign); enable it with "
                            "[ml2] extension_drivers = port_security in ml2_conf.ini")

    # -- ports of fixed-MAC NICs --

    def _mac_ports(self, server_name: str, nics, networks) -> list[str]:
        """Neutron ports for the NICs with a fixed MAC, put into ``networks`` (Nova's list,
        one entry per NIC) in their NIC's place; their ids (deleted again on failure)."""
        made: list[str] = []
        plugged = [i for i, nic in enumerate(nics) if nic.bridge]     # networks' order
        try:
            for i, nic in enumerate(nics):
                if not nic.mac:
                    continue
                if not nic.bridge:
                    raise ZoneError(f"nics[{i}].mac: a NIC with a fixed MAC needs a network "
                                    f"(nics[{i}].bridge) in zone {self.name}")
                k = plugged.index(i)
                try:
                    port = self.conn.network.create_port(
                        network_id=networks[k]["uuid"], mac_address=nic.mac,
                        name=f"{server_name}-nic{i}")
                except osexc.SDKException as e:
                    raise self._fail(f"creating a port with MAC {nic.mac} (nics[{i}])", e) from None
                made.append(port.id)
                networks[k] = {"port": port.id}
        except ZoneError:
            self._delete_ports(made)
            raise
        return made

    def _delete_ports(self, port_ids) -> None:
        for pid in port_ids:
            try:
                self.conn.network.delete_port(pid, ignore_missing=True)
            except osexc.SDKException as e:
                raise self._fail(f"deleting port {pid}", e) from None

    def _server_ports(self, server_id: str) -> list[str]:
        """The ports this zone made for a server (its metadata), before it is deleted."""
        try:
            server = self.conn.compute.find_server(server_id, ignore_missing=True)
        except osexc.SDKException as e:
            raise self._fail(f"reading server {server_id}", e) from None
        ports = ((server.metadata or {}).get(META_PORTS) or "") if server is not None else ""
        return [p for p in ports.split(",") if p]

    # -- stats --

    def stats(self, instance_id: str) -> dict:
        """The VNF's ``stats`` reply, from the server's diagnostics."""
        try:
            resp = self.conn.compute.get(f"/servers/{instance_id}/diagnostics",
                                         microversion=DIAGNOSTICS_MICROVERSION)
            osexc.raise_from_response(resp)
        except osexc.SDKException as e:
            raise self._fail(f"reading the diagnostics of server {instance_id}", e) from None
        st = resp.json().get("vnf_stats")
        if not isinstance(st, dict):
            raise ZoneError(f"zone {self.name}: server {instance_id}'s diagnostics have no "
                            "vnf_stats: its nova-compute runs a fluidvim driver older than "
                            "this orchestrator (upgrade it)")
        return st
