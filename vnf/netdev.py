# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Tap devices and Linux bridges for VNF NICs: netlink (pyroute2), and ioctls on the launch paths.

:func:`attach` / :func:`detach` are the one place where a NIC meets its network: a Linux bridge
(:func:`plug`), an Open vSwitch bridge with the port's external ids (:mod:`fluidvim.vnf.ovs`),
or nothing.

Launches and the ``fluidvim vnf`` commands normally need only the ioctls (:func:`exists`,
:func:`plug`, :func:`rename`): pyroute2 (~150 ms to import) is imported by the first netlink request.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import socket
import struct
import threading

from . import limits, ovs

LOG = logging.getLogger(__name__)
TAP_PREFIX = "fv"

_local = threading.local()


class NetdevError(RuntimeError):
    pass


def _ipr():
    """This thread's netlink socket (pyroute2 IPRoute objects are not thread-safe)."""
    ipr = getattr(_local, "ipr", None)
    if ipr is None:
        from pyroute2 import IPRoute

        ipr = _local.ipr = IPRoute()
    return ipr


def _link(what: str, *args, tolerate: int | None = None, **kwargs) -> bool:
    """One netlink link request; False when it fails with errno ``tolerate`` (someone else got
    there first), NetdevError ``what: ...`` for any other failure."""
    from pyroute2.netlink.exceptions import NetlinkError

    try:
        _ipr().link(*args, **kwargs)
    except NetlinkError as e:
        if e.code == tolerate:
            return False
        raise NetdevError(f"{what}: {e}") from e
    return True


def _index(name: str) -> int | None:
    try:
        return socket.if_nametoindex(name)     # one ioctl; a netlink lookup dumps every link
    except OSError:
        return None


def exists(name: str) -> bool:
    return _index(name) is not None


def ensure_bridge(name: str) -> int:
    """Create bridge ``name`` if missing and bring it up; return its ifindex."""
    idx = _index(name)
    if idx is None:
        _link(f"cannot create bridge {name}", "add", ifname=name, kind="bridge",
              tolerate=errno.EEXIST)              # created concurrently: fine
        idx = _index(name)
        if idx is None:
            raise NetdevError(f"bridge {name} was created but has no index: it was removed concurrently")
    _link(f"cannot bring bridge {name} up", "set", index=idx, state="up")
    return idx


def delete_link(name: str) -> bool:
    """Delete a link if it exists; True if something was deleted."""
    idx = _index(name)
    if idx is None:
        return False
    return _link(f"cannot delete {name}", "del", index=idx, tolerate=errno.ENODEV)  # gone meanwhile


def set_alias(name: str, alias: str) -> None:
    """Set a link's ``ifalias`` (what ``ip link show`` prints as ``alias``; kept by the kernel)."""
    idx = _index(name)
    if idx is None:
        raise NetdevError(f"link {name} does not exist")
    _link(f"cannot set the alias of {name}", "set", index=idx, ifalias=alias)


def aliased(prefix: str) -> dict[str, str]:
    """{link name: alias} of the links whose alias starts with ``prefix``."""
    out = {}
    for link in _ipr().get_links():
        alias = link.get_attr("IFLA_IFALIAS")
        if alias and alias.startswith(prefix):
            out[link.get_attr("IFLA_IFNAME")] = alias
    return out


def ports_of(bridge: str) -> list[str]:
    """Names of the links attached to ``bridge`` ([] when it does not exist)."""
    try:
        return sorted(os.listdir(f"/sys/class/net/{bridge}/brif"))
    except OSError:
        return []


SIOCBRADDIF, SIOCBRDELIF = 0x89A2, 0x89A3
SIOCGIFFLAGS, SIOCSIFFLAGS = 0x8913, 0x8914
SIOCSIFNAME = 0x8923
SIOCSIFTXQLEN = 0x8943
IFF_UP = 0x1


def _ioctl_sock() -> socket.socket:
    sock = getattr(_local, "sock", None)
    if sock is None:
        sock = _local.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
    return sock


def _ifreq(name: str, payload: bytes) -> bytes:
    return struct.pack("16s", name.encode()) + payload.ljust(24, b"\0")


def plug(tap: str, bridge: str | None) -> None:
    """Attach ``tap`` to ``bridge`` (must exist) and bring it up; detach it when ``bridge`` is None.

    This is on the warm-launch path, so it uses the bridge ioctls (three system calls, ~0.1 ms)
    rather than netlink through pyroute2 (~0.5-1 ms per request here).
    """
    idx = _index(tap)
    if idx is None:
        raise NetdevError(f"tap {tap} does not exist")
    sock = _ioctl_sock()
    if bridge is None:
        master = master_of(tap)
        if master is not None:
            fcntl.ioctl(sock, SIOCBRDELIF, _ifreq(master, struct.pack("i", idx)))
        return
    if _index(bridge) is None:
        raise NetdevError(f"bridge {bridge!r} does not exist: create it first "
                          f"(ip link add {bridge} type bridge) or pick an existing one")
    try:
        fcntl.ioctl(sock, SIOCBRADDIF, _ifreq(bridge, struct.pack("i", idx)))
    except OSError as e:
        raise NetdevError(f"cannot add {tap} to bridge {bridge}: {e.strerror}") from None
    set_txqueuelen(tap)
    flags = _flags(tap)
    if not flags & IFF_UP:
        _set_flags(tap, flags | IFF_UP)


def set_txqueuelen(tap: str, qlen: int = limits.TAP_TXQUEUELEN) -> None:
    """Let ``tap`` hold ``qlen`` frames for QEMU (``limits.TAP_TXQUEUELEN``: fewer drops while
    QEMU's main thread waits for a CPU)."""
    try:
        fcntl.ioctl(_ioctl_sock(), SIOCSIFTXQLEN, _ifreq(tap, struct.pack("i", qlen)))
    except OSError as e:
        raise NetdevError(f"cannot set txqueuelen of {tap}: {e.strerror}") from None


def attach(nic) -> None:
    """Attach NIC ``nic`` (a :class:`~fluidvim.vnf.spec.NicSpec` whose tap exists) where its spec
    says: with ``nic.ovs``, bring the tap up and make it a port of OVS bridge ``nic.bridge`` with
    those external ids (plus ``attached-mac``); else plug it into Linux bridge ``nic.bridge``;
    a NIC without a bridge stays unplugged."""
    if nic.bridge is None:
        return
    if nic.ovs is None:
        plug(nic.tap, nic.bridge)
        return
    try:
        flags = _flags(nic.tap)
    except OSError:
        raise NetdevError(f"tap {nic.tap} does not exist") from None
    if not flags & IFF_UP:
        _set_flags(nic.tap, flags | IFF_UP)
    set_txqueuelen(nic.tap)
    try:
        ovs.add_port(nic.bridge, nic.tap, ovs.external_ids(nic.ovs, nic.mac))
    except ovs.OvsError as e:
        raise NetdevError(f"cannot add {nic.tap} to OVS bridge {nic.bridge}: {e}") from None


def detach(nic) -> None:
    """Undo :func:`attach`: the tap leaves its Linux bridge, or its OVS port is removed."""
    if nic.ovs is not None and nic.bridge is not None:
        try:
            ovs.del_port(nic.bridge, nic.tap)
        except ovs.OvsError as e:
            raise NetdevError(f"cannot remove OVS port {nic.tap}: {e}") from None
    elif exists(nic.tap):
        plug(nic.tap, None)


def bridge_problem(bridge: str, is_ovs: bool) -> str | None:
    """Why NICs cannot be attached to ``bridge`` (a Linux or, ``is_ovs``, an OVS bridge), or None."""
    if is_ovs:
        try:
            if ovs.bridge_exists(bridge):
                return None
        except ovs.OvsError as e:
            return f"cannot ask Open vSwitch about bridge {bridge!r}: {e}"
        return (f"OVS bridge {bridge!r} does not exist: create it first (ovs-vsctl add-br "
                f"{bridge}; the Neutron agent or os-vif creates br-int)")
    if not exists(bridge):
        return f"bridge {bridge!r} does not exist: create it first (ip link add {bridge} type bridge)"
    return None


def _flags(name: str) -> int:
    return struct.unpack_from("H", fcntl.ioctl(_ioctl_sock(), SIOCGIFFLAGS, _ifreq(name, b"")), 16)[0]


def _set_flags(name: str, flags: int) -> None:
    fcntl.ioctl(_ioctl_sock(), SIOCSIFFLAGS, _ifreq(name, struct.pack("H", flags)))


def rename(old: str, new: str) -> None:
    """Rename link ``old`` to ``new`` (e.g. a warm shell's tap to a Neutron port's devname).

    Linux renames only links that are down: an up link is taken down, renamed and brought up
    again; a down one stays down (:func:`plug` brings a tap up when it plugs it). A tap keeps
    its file descriptor, so QEMU does not notice. Like :func:`plug` this is on the warm-launch
    path and uses ioctls (SIOCSIFNAME; ~10 us) rather than netlink. Raises NetdevError when
    ``old`` is missing or ``new`` is taken (the link is then left as it was).
    """
    if old == new:
        return
    if len(new.encode()) > 15:
        raise NetdevError(f"cannot rename {old} to {new!r}: interface names have at most 15 bytes")
    try:
        flags = _flags(old)
    except OSError:
        raise NetdevError(f"cannot rename {old}: it does not exist") from None
    if flags & IFF_UP:
        _set_flags(old, flags & ~IFF_UP)
    try:
        fcntl.ioctl(_ioctl_sock(), SIOCSIFNAME, _ifreq(old, struct.pack("16s", new.encode())))
    except OSError as e:
        if flags & IFF_UP:
            _set_flags(old, flags)
        why = "a device with that name already exists" if e.errno == 17 else e.strerror
        raise NetdevError(f"cannot rename {old} to {new}: {why}") from None
    if flags & IFF_UP:
        _set_flags(new, flags)


def list_taps(prefix: str = TAP_PREFIX) -> list[str]:
    """Names of links starting with ``prefix`` (leak checks, recovery clean-up)."""
    names = []
    for link in _ipr().get_links():
        name = link.get_attr("IFLA_IFNAME")
        if name and name.startswith(prefix):
            names.append(name)
    return names


def master_of(name: str) -> str | None:
    idx = _index(name)
    if idx is None:
        return None
    master = _ipr().get_links(idx)[0].get_attr("IFLA_MASTER")
    if not master:
        return None
    return _ipr().get_links(master)[0].get_attr("IFLA_IFNAME")
