# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The VNF launch spec and its one mapping to QEMU argv and libvirt domain XML.

This module is the single place where a VNF launch spec becomes something a hypervisor runs. The Go
Nomad driver implements the same mapping and both are pinned by ``contract/vectors/spec.json``.

Two machines are supported (see ``contract/PROTOCOL.md`` §1):

* ``microvm`` — QEMU direct backend: virtio-mmio NICs, the fluidvim-pvh firmware (or qboot), fastest
  boot;
* ``pc`` + qboot — libvirt backend (libvirt 9 cannot drive microvm): virtio-pci NICs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os.path
import re
import shutil
import uuid as uuidlib

from fluidvim.common.zonetypes import (
    NicRequest,
    QoE,
    as_nics,
    ifname_problem,
    mac_problem,
    nics_problem,
)

from . import limits
from .limits import MAX_CLICK_CONFIG_BYTES, MAX_NICS

MACHINES = ("microvm", "pc")
ACCELS = ("kvm", "tcg")
MAX_SLOTS = limits.SLOTS_MAX
QBOOT_ROM = "/usr/share/qemu/qboot.rom"
# The direct backend's QEMU: "auto" takes Debian's minimal microvm build when it can run the spec
# (machine microvm, KVM; it has no TCG and no pc machine) - 10 shared libraries instead of 51:
# ~30 % less CPU per cold launch and about half the per-VM RSS (bench/RESULTS.md, bench/density).
QEMU_AUTO = "auto"
QEMU_FULL = "qemu-system-x86_64"
QEMU_MICROVM = "qemu-system-x86_64-microvm"
# The direct backend's firmware: "auto" takes fluidvim-pvh.bin from the kernel image's directory
# (unikernel/firmware/pvh.S: four fw_cfg DMA reads and a jump, where qboot runs ~6 ms of ring-0
# code that KVM-PVM emulates instruction by instruction) when the machine is microvm and the file
# is there; "qemu" (or no file) keeps QEMU's default, qboot; anything else is a path.
FIRMWARE_AUTO = "auto"
FIRMWARE_QEMU = "qemu"
PVH_FIRMWARE = "fluidvim-pvh.bin"
# How a microvm VNF's NICs reach their taps: "tap" = QEMU's tap netdev (every frame is a system
# call in QEMU's one main thread); "vhost-user" = fluidvim-vhost-net (vhost), a backend
# process with one thread per NIC that owns the taps and reads/writes guest memory directly
# (guest RAM is then a shared memfd). The backend's socket of NIC i is an inherited fd.
NET_TAP = "tap"
NET_VHOST_USER = "vhost-user"
NET_BACKENDS = (NET_TAP, NET_VHOST_USER)
# libvirt <metadata> namespace holding the spec, used to find VNFs again after a restart.
XMLNS = "https://fluidvim.org/xmlns/vnf/1"
DOMAIN_PREFIX = "fluidvim-"

_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,%d}" % (limits.MAX_NAME - 1))
_IFNAME_RE = re.compile(r"[A-Za-z0-9_.-]{1,15}")


class SpecError(ValueError):
    """A launch spec is invalid. ``field`` names the offending field."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field


def click_config_problem(config) -> str | None:
    """Why a Click configuration cannot be sent in ``configure`` (None: it can)."""
    if config is not None and len(config.encode()) > MAX_CLICK_CONFIG_BYTES:
        return (f"{len(config.encode())} bytes, longer than {MAX_CLICK_CONFIG_BYTES} bytes (the "
                f"control channel carries at most {limits.MAX_CONTROL_LINE} bytes per message)")
    return None


@dataclasses.dataclass(frozen=True)
class NicSpec:
    """One virtio-net NIC: a tap device, optionally plugged into a Linux bridge or an OVS bridge.

    ``tap`` is the tap's current name and ``mac`` the NIC's own address as the VNF uses it (ARP,
    ``stats``). A VNF started from a warm shell with a given MAC and tap name (a Neutron port)
    records those: its tap was renamed at claim and the VNF was told the MAC in ``configure``,
    while the shell's QEMU device keeps the MAC it was booted with. Nothing reads that device
    MAC back (teardown, recovery and ``list`` go by tap name, pid and control socket), and
    argv/XML made from the recorded spec boot a VNF whose device already has the right MAC.

    ``ovs`` (a dict of Interface external ids, e.g. ``iface-id`` and ``vm-uuid`` of a Neutron
    port) makes ``bridge`` an Open vSwitch bridge: the tap is added to it as a port with those
    ids plus ``attached-mac`` = ``mac`` (:mod:`fluidvim.vnf.ovs`). None = a Linux bridge (or no
    bridge). It is left out of :meth:`VNFSpec.to_dict` when None, so specs without OVS NICs
    (the test vectors, the Go driver's) are unchanged.
    """

    tap: str
    mac: str
    bridge: str | None = None
    ovs: dict | None = dataclasses.field(default=None, hash=False)

    def validate(self, i: int) -> None:
        # a spec's NIC has its tap and MAC chosen and a bridge that is a host interface name;
        # the rest are a NIC request's rules
        for field, rule in (("tap", ifname_problem), ("mac", mac_problem)):
            problem = rule(getattr(self, field))
            if problem:
                raise SpecError(f"nics[{i}].{field}", problem)
        if self.bridge is not None and not _IFNAME_RE.fullmatch(self.bridge):
            raise SpecError(f"nics[{i}].bridge", f"{self.bridge!r} is not a valid bridge name")
        problem2 = NicRequest(self.bridge, self.mac, self.tap, self.ovs).problem()
        if problem2:
            raise SpecError(f"nics[{i}].{problem2[0]}", problem2[1])


@dataclasses.dataclass(frozen=True)
class VNFSpec:
    """Everything needed to start one VNF. Paths are absolute on the host."""

    uuid: str
    name: str
    kernel: str
    control_socket: str
    console_log: str
    memory_mb: int = limits.MEMORY_MB_DEFAULT
    vcpus: int = limits.VCPUS_DEFAULT
    nics: tuple[NicSpec, ...] = ()
    session_slots: int = limits.SLOTS_DEFAULT
    flow_timeout_ms: int = limits.FLOW_TIMEOUT_MS_DEFAULT
    click_config: str | None = None
    machine: str = "microvm"
    accel: str = "kvm"
    qmp_socket: str | None = None
    cmdline_extra: str = ""
    tsc_khz: int | None = None     # for TCG guests, which cannot calibrate their clock
    firmware: str | None = None    # microvm: the -bios image (None: QEMU's default, qboot)
    net_backend: str = NET_TAP     # microvm: NET_TAP or NET_VHOST_USER (left out of to_dict if tap)
    # slots at the service's QoE, told to the VNF after each configure of a launch or rebuild
    # (left out of to_dict when None: specs without one read as before - vectors, Go driver)
    qoe: QoE | None = None

    def validate(self) -> "VNFSpec":
        try:
            uuidlib.UUID(self.uuid)
        except (ValueError, TypeError):
            raise SpecError("uuid", f"{self.uuid!r} is not a UUID") from None
        if not _NAME_RE.fullmatch(self.name or ""):
            raise SpecError("name", f"{self.name!r}: use 1-{limits.MAX_NAME} characters of A-Z a-z 0-9 _ . - "
                            "starting with a letter or digit")
        for field in ("kernel", "control_socket", "console_log"):
            value = getattr(self, field)
            if not value or not value.startswith("/"):
                raise SpecError(field, f"{value!r} must be an absolute path")
        lo, hi = limits.MEMORY_MB_MIN, limits.MEMORY_MB_MAX
        if not lo <= self.memory_mb <= hi:
            raise SpecError("memory_mb", f"{self.memory_mb} is out of range {lo}..{hi} "
                            f"(the VNF needs about {lo} MiB; {limits.MEMORY_MB_DEFAULT} is the "
                            "default)")
        if not limits.VCPUS_MIN <= self.vcpus <= limits.VCPUS_MAX:
            raise SpecError("vcpus", f"{self.vcpus} is out of range "
                            f"{limits.VCPUS_MIN}..{limits.VCPUS_MAX}")
        self._validate_nics()
        if not limits.SLOTS_MIN <= self.session_slots <= limits.SLOTS_MAX:
            raise SpecError("session_slots", f"{self.session_slots} is out of range "
                            f"{limits.SLOTS_MIN}..{limits.SLOTS_MAX}")
        if not limits.FLOW_TIMEOUT_MS_MIN <= self.flow_timeout_ms <= limits.FLOW_TIMEOUT_MS_MAX:
            raise SpecError("flow_timeout_ms", f"{self.flow_timeout_ms} is out of range "
                            f"{limits.FLOW_TIMEOUT_MS_MIN}..{limits.FLOW_TIMEOUT_MS_MAX}")
        if self.machine not in MACHINES:
            raise SpecError("machine", f"{self.machine!r} is not one of {', '.join(MACHINES)}")
        if self.accel not in ACCELS:
            raise SpecError("accel", f"{self.accel!r} is not one of {', '.join(ACCELS)}")
        if self.firmware is not None:
            if not self.firmware.startswith("/"):
                raise SpecError("firmware", f"{self.firmware!r} must be an absolute path")
            if self.machine != "microvm":
                raise SpecError("firmware", "only microvm takes a firmware image; pc boots "
                                "through qboot (the libvirt backend's loader)")
        if self.net_backend not in NET_BACKENDS:
            raise SpecError("net_backend", f"{self.net_backend!r} is not one of "
                            f"{', '.join(NET_BACKENDS)}")
        if self.net_backend != NET_TAP and self.machine != "microvm":
            raise SpecError("net_backend", f"{self.net_backend} NICs run on the qemu backend "
                            "(microvm) only; the libvirt backend (pc) uses tap")
        if self.tsc_khz is not None and not limits.TSC_KHZ_MIN <= self.tsc_khz <= limits.TSC_KHZ_MAX:
            raise SpecError("tsc_khz", f"{self.tsc_khz} is out of range "
                            f"{limits.TSC_KHZ_MIN}..{limits.TSC_KHZ_MAX}")
        if any(c in self.cmdline_extra for c in "\n\r\0"):
            raise SpecError("cmdline_extra", "must be a single line")
        why = click_config_problem(self.click_config)
        if why:
            raise SpecError("click_config", why)
        if self.qoe is not None and not isinstance(self.qoe, QoE):
            raise SpecError("qoe", f"{self.qoe!r} is not a QoE (or None)")
        return self

    def _validate_nics(self) -> None:
        if len(self.nics) > MAX_NICS:
            raise SpecError("nics", f"{len(self.nics)} NICs requested; a VNF has at most "
                            f"{MAX_NICS}")
        for i, nic in enumerate(self.nics):
            nic.validate(i)
        taps = [n.tap for n in self.nics]
        if len(set(taps)) != len(taps):
            raise SpecError("nics", "two NICs use the same tap device")

    # -- serialisation (state store, libvirt metadata, test vectors) --
    def to_dict(self) -> dict:
        # fields are str/int/None and the NICs (dataclasses.asdict's deep copies cost ~0.1 ms
        # per call, several calls per launch)
        d = {f.name: getattr(self, f.name) for f in _SPEC_FIELDS}
        d["nics"] = [_nic_dict(n) for n in self.nics]
        if self.net_backend == NET_TAP:
            del d["net_backend"]        # specs of tap VNFs read as before (vectors, Go driver)
        if self.qoe is None:
            del d["qoe"]                # likewise for VNFs without a QoE
        else:
            d["qoe"] = {k: v for k, v in dataclasses.asdict(self.qoe).items()
                        if k != "wait_ppm" or v}   # no host-wait rule: stored as before
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "VNFSpec":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise SpecError(sorted(unknown)[0], "unknown field (known: "
                            + ", ".join(sorted(known)) + ")")
        d = dict(d)
        d["nics"] = tuple(NicSpec(**n) for n in d.get("nics", ()))
        if d.get("qoe") is not None:
            try:
                d["qoe"] = QoE(**d["qoe"])
            except (TypeError, ValueError) as e:
                raise SpecError("qoe", f"{d['qoe']!r}: {e}") from None
        return cls(**d)

    def with_changes(self, **kw) -> "VNFSpec":
        return dataclasses.replace(self, **kw)


def _nic_dict(nic: NicSpec) -> dict:
    d: dict = {"tap": nic.tap, "mac": nic.mac, "bridge": nic.bridge}
    if nic.ovs is not None:
        d["ovs"] = dict(nic.ovs)
    return d


_SPEC_FIELDS = dataclasses.fields(VNFSpec)


@dataclasses.dataclass(frozen=True)
class LaunchArgs:
    """What one launch asks of the launch core (:meth:`fluidvim.vnf.manager.VNFManager.launch`),
    checked when it is made: ``SpecError`` naming the field (``nics[1].mac``, ``slots``, ...).

    ``nics``: one :class:`~fluidvim.common.zonetypes.NicRequest` per NIC (a bridge name or None
    stands for a NIC on that bridge / unplugged); bridge, MAC, tap name and OVS ids left None
    are chosen by the launch. ``slots``/``memory_mb`` None: ``[vnf]``'s; ``kernel`` None: ``[vnf]
    kernel``; ``backend`` None: ``[vnf] backend``; ``warm`` None: a warm shell when one of this
    shape is ready, False: always cold; ``qoe``: the VNF's slots at the service's QoE, sent
    after its configuration and kept in its spec (a rebuild sends it again)."""

    click_config: str
    nics: tuple = ()
    name: str | None = None
    slots: int | None = None
    memory_mb: int | None = None
    vcpus: int = 1
    kernel: str | None = None
    backend: str | None = None
    warm: bool | None = None
    qoe: QoE | None = None

    def __post_init__(self):
        try:
            object.__setattr__(self, "nics", as_nics(self.nics))
        except TypeError as e:
            raise SpecError("nics", str(e)) from None
        if len(self.nics) > MAX_NICS:
            raise SpecError("nics", f"{len(self.nics)} NICs requested; a VNF has at most "
                            f"{MAX_NICS}")
        problem = nics_problem(self.nics)
        if problem:
            raise SpecError(*problem)
        if not isinstance(self.click_config, str):
            raise SpecError("click_config", f"{type(self.click_config).__name__}: give the "
                            "Click configuration as text")
        why = click_config_problem(self.click_config)
        if why:                         # before a shell is claimed or anything boots
            raise SpecError("click_config", why)
        if self.qoe is not None and not isinstance(self.qoe, QoE):
            raise SpecError("qoe", f"{self.qoe!r} is not a QoE(capacity, deadline_ms, quantile) "
                            "(or None = the flow table's slots)")

    def with_changes(self, **kw) -> "LaunchArgs":
        return dataclasses.replace(self, **kw)


def mac_for(vnf_uuid: str, index: int) -> str:
    """A stable unicast MAC in QEMU's 52:54:00 range for NIC ``index`` of a VNF."""
    h = hashlib.sha256(f"{vnf_uuid}/{index}".encode()).digest()
    return "52:54:00:%02x:%02x:%02x" % (h[0], h[1], h[2])


def tap_for(vnf_uuid: str, index: int) -> str:
    """Tap device name for NIC ``index`` of a VNF (13 characters, within IFNAMSIZ)."""
    return f"fv{uuidlib.UUID(vnf_uuid).hex[:10]}n{index}"


def kernel_cmdline(spec: VNFSpec) -> str:
    """The guest command line (``contract/PROTOCOL.md`` §1). The config is sent later, never here."""
    parts = [f"slots={spec.session_slots}", f"flow_timeout_ms={spec.flow_timeout_ms}",
             f"name={spec.name}"]
    if spec.tsc_khz:
        parts.append(f"tsc_khz={spec.tsc_khz}")
    if spec.cmdline_extra:
        parts.append(spec.cmdline_extra)
    return " ".join(parts)


def _cpu_args(accel: str) -> list[str]:
    # `-cpu host` aborts QEMU on this PVM host (kvm_pvm; MSR 0x10a): max minus arch-capabilities works.
    if accel == "kvm":
        return ["-accel", "kvm", "-cpu", "max,-arch-capabilities"]
    return ["-accel", "tcg", "-cpu", "max"]


def qemu_binary(spec: VNFSpec, requested: str = QEMU_AUTO, *, available=None) -> str:
    """The QEMU binary (a name or path) that runs ``spec`` on the direct backend.

    ``requested`` is ``[vnf] qemu_binary``: a name or path is used as given; ``auto`` is the
    microvm-only build where it can run the spec and exists (``available(name)``: a callable
    returning a truthy value for an installed binary, default ``shutil.which``), else the full
    build. The Go plugin applies the same rule (nomad_driver/spec, vectors in spec_vectors.json).
    """
    if requested != QEMU_AUTO:
        return requested
    available = available or shutil.which
    if spec.machine == "microvm" and spec.accel == "kvm" and available(QEMU_MICROVM):
        return QEMU_MICROVM
    return QEMU_FULL


def firmware_for(machine: str, kernel: str, requested: str = FIRMWARE_AUTO, *,
                 exists=None) -> str | None:
    """The ``firmware`` of a spec for the configured ``[vnf] firmware`` (``requested``).

    "auto": ``PVH_FIRMWARE`` next to ``kernel`` when ``machine`` is microvm and that file exists,
    else None (QEMU's default); "qemu": None; anything else: that path. The Go plugin applies
    the same rule (spec.FirmwareFor); both are pinned by contract/vectors/spec.json "firmware_rule".
    """
    if requested == FIRMWARE_QEMU:
        return None
    if requested != FIRMWARE_AUTO:
        return requested
    if machine != "microvm":
        return None
    path = os.path.join(os.path.dirname(kernel), PVH_FIRMWARE)
    return path if (exists or os.path.exists)(path) else None


def vhost_socket(spec: VNFSpec, index: int) -> str:
    """NIC ``index``'s vhost-user socket (net_backend vhost-user): beside the control socket.
    The launcher listens on it and hands it to fluidvim-vhost-net before QEMU connects (QEMU 7.2
    passes memory fds only over a socket it opened by path)."""
    return os.path.join(os.path.dirname(spec.control_socket), f"vhost{index}.sock")


def qemu_argv(spec: VNFSpec, *, qemu: str = QEMU_FULL, control_fd: int = 3,
              qmp_fd: int | None = 4) -> list[str]:
    """QEMU argv for the direct backend (microvm, virtio-mmio).

    The control channel and QMP monitor are listening sockets that the launcher binds, listens on and
    hands to QEMU as inherited file descriptors: the launcher can connect at once, with no waiting for
    QEMU to create a socket file, and a restarted launcher reconnects to the same path. With
    ``net_backend`` vhost-user, NIC i connects to :func:`vhost_socket` (fluidvim-vhost-net is
    listening there) and guest RAM is a shared memfd the backend maps.
    """
    spec.validate()
    if spec.machine != "microvm":
        raise SpecError("machine", "the QEMU direct backend runs microvm; use the libvirt "
                        "backend for pc")
    vhost = spec.net_backend == NET_VHOST_USER
    machine = "microvm,x-option-roms=off,pit=off,pic=off,rtc=off,isa-serial=on,acpi=off"
    argv = [qemu, "-name", f"guest={spec.name},debug-threads=off", "-uuid", spec.uuid,
            "-M", machine + (",memory-backend=mem" if vhost else ""),
            *(["-bios", spec.firmware] if spec.firmware else []),
            *_cpu_args(spec.accel),
            "-m", str(spec.memory_mb), "-smp", str(spec.vcpus),
            *(["-object", f"memory-backend-memfd,id=mem,size={spec.memory_mb}M,share=on"]
              if vhost else []),
            "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
            "-kernel", spec.kernel, "-append", kernel_cmdline(spec),
            "-chardev", f"file,id=con,path={spec.console_log}", "-serial", "chardev:con",
            # control channel: virtio-console port 0 (a UART costs a VM exit per byte)
            "-device", "virtio-serial-device,max_ports=1",
            "-chardev", f"socket,id=ctl,fd={control_fd},server=on,wait=on",
            "-device", "virtconsole,chardev=ctl,nr=0"]
    if qmp_fd is not None:
        argv += ["-chardev", f"socket,id=qmp,fd={qmp_fd},server=on,wait=off",
                 "-mon", "chardev=qmp,mode=control"]
    for i, nic in enumerate(spec.nics):
        if vhost:
            argv += ["-chardev", f"socket,id=vu{i},path={vhost_socket(spec, i)}",
                     "-netdev", f"vhost-user,id=net{i},chardev=vu{i}"]
        else:
            argv += ["-netdev", f"tap,id=net{i},ifname={nic.tap},script=no,downscript=no"]
        argv += ["-device", f"virtio-net-device,netdev=net{i},mac={nic.mac}"]
    return argv


def domain_name(spec: VNFSpec) -> str:
    return DOMAIN_PREFIX + spec.uuid


def libvirt_xml(spec: VNFSpec, *, emulator: str = "/usr/bin/qemu-system-x86_64",
                loader: str = QBOOT_ROM) -> str:
    """libvirt domain XML for the libvirt backend: pc + qboot, PVH kernel boot, nothing else.

    No disks, no graphics, no video, no balloon, no USB; the console log is serial port 0 (a file), the
    control channel a virtio console (a unix socket libvirt's QEMU listens on) on a one-port
    virtio-serial controller (the default 31 ports cost 8-20 ms of boot). QEMU runs as root
    without relabelling, so one cached kernel can be shared by many domains at once.
    """
    # only the libvirt backend needs XML: saxutils pulls in urllib.request (~30 ms of imports)
    from xml.sax.saxutils import escape, quoteattr

    spec.validate()
    if spec.machine != "pc":
        raise SpecError("machine", "libvirt 9 cannot drive microvm (no PCI bus); use machine=pc")
    dom_type = "kvm" if spec.accel == "kvm" else "qemu"
    cpu = ("<cpu mode='host-passthrough' check='none' migratable='off'>"
           "<feature policy='disable' name='arch-capabilities'/></cpu>"
           if spec.accel == "kvm" else "<cpu mode='custom' match='exact'><model>max</model></cpu>")
    meta = escape(json.dumps(spec.to_dict(), sort_keys=True, separators=(",", ":")))
    nics = "".join(
        "<interface type='ethernet'>"
        f"<mac address={quoteattr(n.mac)}/>"
        f"<target dev={quoteattr(n.tap)}/>"
        "<model type='virtio'/></interface>" for n in spec.nics)
    return (
        f"<domain type='{dom_type}'>"
        f"<name>{escape(domain_name(spec))}</name>"
        f"<uuid>{spec.uuid}</uuid>"
        f"<title>{escape(spec.name)}</title>"
        f"<metadata><fluidvim:vnf xmlns:fluidvim='{XMLNS}'>{meta}</fluidvim:vnf></metadata>"
        f"<memory unit='MiB'>{spec.memory_mb}</memory>"
        f"<vcpu>{spec.vcpus}</vcpu>"
        "<os><type arch='x86_64' machine='pc'>hvm</type>"
        f"<loader type='rom'>{escape(loader)}</loader>"
        f"<kernel>{escape(spec.kernel)}</kernel>"
        f"<cmdline>{escape(kernel_cmdline(spec))}</cmdline></os>"
        f"{cpu}"
        "<clock offset='utc'/>"
        "<on_poweroff>destroy</on_poweroff><on_reboot>restart</on_reboot>"
        "<on_crash>destroy</on_crash>"
        "<devices>"
        f"<emulator>{escape(emulator)}</emulator>"
        f"<serial type='file'><source path={quoteattr(spec.console_log)}/>"
        "<target port='0'/></serial>"
        f"<console type='unix'><source mode='bind' path={quoteattr(spec.control_socket)}/>"
        "<target type='virtio' port='0'/></console>"
        "<controller type='virtio-serial' index='0' ports='1'/>"
        f"{nics}"
        "<controller type='usb' model='none'/>"
        "<memballoon model='none'/>"
        "</devices>"
        "<seclabel type='static' model='dac' relabel='no'><label>+0:+0</label></seclabel>"
        "</domain>")


def spec_from_libvirt_metadata(text: str) -> VNFSpec:
    """Inverse of the ``<metadata>`` element written by :func:`libvirt_xml`."""
    import xml.etree.ElementTree as ET

    root = ET.fromstring(text)
    return VNFSpec.from_dict(json.loads(root.text or "{}"))
