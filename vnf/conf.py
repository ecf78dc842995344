# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""oslo.config options of the launch core (group ``[vnf]``)."""

from __future__ import annotations

import os
from importlib import resources

from oslo_config import cfg

from fluidvim.common.optgroups import register_group

from . import limits, states

# Where an installed wheel carries the images it was built with (package data of this package,
# setup.py: BuildPyWithImages); absent in a source checkout (editable install).
PACKAGED_DIR = str(resources.files(__package__).joinpath("images"))
PACKAGED_KERNEL = os.path.join(PACKAGED_DIR, "fluidvim-vnf.elf")
PACKAGED_VHOST_NET = os.path.join(PACKAGED_DIR, "fluidvim-vhost-net")
# The repository root of a source checkout (editable install: vnf/ is fluidvim.vnf).
_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Where `make -C unikernel` puts the image in a source checkout.
SOURCE_KERNEL = os.path.join(_REPO, "unikernel", "build", "fluidvim-vnf.elf")
INSTALLED_KERNEL = "/usr/share/fluidvim/fluidvim-vnf.elf"
SOURCE_VHOST_NET = os.path.join(_REPO, "vhost", "build", "fluidvim-vhost-net")
INSTALLED_VHOST_NET = "/usr/libexec/fluidvim/fluidvim-vhost-net"

vnf_group = cfg.OptGroup("vnf", title="Unikernel VNF launch core",
                         help="How fluidvim starts unikernel VNFs on this host.")

vnf_opts = [
    cfg.StrOpt("backend", default=states.QEMU, choices=list(states.BACKENDS),
               help="qemu: a QEMU process per VNF (microvm, fastest). libvirt: a transient "
                    "libvirt domain (pc + qboot), visible to virsh and other libvirt tools."),
    cfg.StrOpt("accel", default="auto", choices=["auto", "kvm", "tcg"],
               help="Accelerator. auto uses KVM when /dev/kvm works, else TCG (software)."),
    cfg.StrOpt("kernel", default=None,
               help="Path of the VNF kernel image (PVH ELF). Default: the image installed with "
                    "the fluidvim wheel (fluidvim/vnf/images/fluidvim-vnf.elf in site-packages), "
                    "else the image built in the source tree (unikernel/build/fluidvim-vnf.elf), "
                    "else " + INSTALLED_KERNEL + "."),
    cfg.StrOpt("qemu_binary", default="auto",
               help="QEMU binary for the qemu backend: a name or path, or 'auto' = Debian's "
                    "minimal microvm build (qemu-system-x86_64-microvm) when the VNF runs on "
                    "KVM and it is installed (faster start, half the memory per VM), else "
                    "qemu-system-x86_64."),
    cfg.StrOpt("firmware", default="auto",
               help="Firmware (-bios) of the qemu backend's microvm VNFs: 'auto' = "
                    "fluidvim-pvh.bin from the kernel image's directory when it is there "
                    "(built with the kernel: four fw_cfg reads and a jump; ~6 ms less host CPU "
                    "per launch under PVM (kvm_pvm) than qboot), else QEMU's default (qboot); "
                    "'qemu' = always QEMU's default; or a path."),
    cfg.StrOpt("net_backend", default="tap", choices=["tap", "vhost-user"],
               help="qemu backend: how VNF NICs reach their taps. 'tap' = QEMU's tap netdev "
                    "(every frame is a system call in QEMU's one main thread). 'vhost-user' = "
                    "fluidvim-vhost-net, a backend process with one thread per NIC that owns the "
                    "taps and reads and writes guest memory directly: more small-packet "
                    "throughput when there is no vhost-net, but guest RAM becomes a shared memfd "
                    "that KSM cannot merge (more memory per idle VNF; bench/RESULTS.md)."),
    cfg.StrOpt("vhost_net_binary", default=None,
               help="Path of fluidvim-vhost-net (net_backend = vhost-user). Default: the one "
                    "installed with the fluidvim wheel (fluidvim/vnf/images/), else the one built "
                    "in the source tree (vhost/build/fluidvim-vhost-net), else "
                    + INSTALLED_VHOST_NET + "."),
    cfg.IntOpt("vcpu_nice", default=limits.VCPU_NICE_DEFAULT, min=0, max=limits.VCPU_NICE_MAX,
               help="qemu backend: nice value of each VNF's vCPU threads, set once the VNF is "
                    "ready (QEMU's main thread and fluidvim-vhost-net stay at 0). A guest "
                    "busy-polls its rings while frames flow; below the threads that move the "
                    "frames it uses only the CPU they leave (64 B no-loss rate ~60 -> 75 kpps "
                    "here, bench/RESULTS.md). 0 = leave them as QEMU started them."),
    cfg.StrOpt("boot_log", default="brief", choices=["brief", "full"],
               help="What a VNF writes to its console log (COM1): 'brief' = one line per boot "
                    "and per configure, and every error; 'full' adds the boot profile, timer, "
                    "control channel, NICs and command line. Every console byte is a VM exit: "
                    "'full' costs ~12 ms of host CPU per launch under PVM (kvm_pvm)."),
    cfg.StrOpt("libvirt_uri", default="qemu:///system", help="libvirt connection URI."),
    cfg.StrOpt("state_dir", default="/var/lib/fluidvim",
               help="Directory for the state database (when state_connection is unset)."),
    cfg.StrOpt("state_connection", default=None, secret=True,
               help="SQLAlchemy URL of the state store; default sqlite:///<state_dir>/vnf.sqlite. "
                    "An empty database is created at the schema's head; after an upgrade run "
                    "`fluidvim-manage db sync --store vnf` before starting."),
    cfg.StrOpt("run_dir", default="/run/fluidvim",
               help="Directory for per-VNF control sockets, QMP sockets and console logs."),
    cfg.IntOpt("memory_mb", default=limits.MEMORY_MB_DEFAULT, min=limits.MEMORY_MB_MIN,
               max=limits.MEMORY_MB_MAX, help="Default VNF memory (MiB)."),
    cfg.IntOpt("session_slots", default=limits.SLOTS_DEFAULT, min=limits.SLOTS_MIN,
               max=limits.SLOTS_MAX,
               help="Default session slots (flow-table capacity) of a VNF."),
    cfg.IntOpt("pool_size", default=0, min=0, max=limits.POOL_SIZE_MAX,
               help="Warm-pool shells kept booted per pool key (kernel, memory, vCPUs, NIC "
                    "count). 0 disables the pool; launches are then always cold."),
    cfg.IntOpt("pool_nics", default=2, min=0, max=limits.MAX_NICS,
               help="Number of NICs of the shells the pool keeps when it fills itself."),
    cfg.FloatOpt("boot_timeout", default=30.0, min=0.5,
                 help="Seconds to wait for a VNF's ready message before the launch fails."),
    cfg.BoolOpt("share_memory", default=True,
                help="QEMU backend: let KSM share identical pages between VNFs (PR_SET_MEMORY_MERGE "
                     "on the launcher, inherited by every QEMU it starts: guest RAM, QEMU's heap "
                     "and relocated data) and keep guest RAM in 4 KiB pages (PR_SET_THP_DISABLE: "
                     "a transparent huge page turns one touched guest page into 2 MiB of host "
                     "memory). Measured: idle VNF private memory 19 -> 8 MiB. Needs KSM running "
                     "on the host (echo 1 > /sys/kernel/mm/ksm/run; tools/bootstrap.sh does it); "
                     "without it only the huge-page half applies."),
    cfg.StrOpt("ovsdb_connection", default=None,
               help="Open vSwitch database of the OVS bridges VNF NICs are attached to (NICs with "
                    "OVS external ids: Neutron ports bound by ML2/OVS or OVN), as ovs-vsctl "
                    "--db takes it: unix:PATH or tcp:IP:PORT. Default: ovs-vsctl's own "
                    "(unix:/var/run/openvswitch/db.sock); the Nova driver uses [os_vif_ovs] "
                    "ovsdb_connection when this is unset."),
    cfg.IntOpt("launch_history", default=limits.LAUNCH_HISTORY_DEFAULT, min=1,
               help="Recent launches used to estimate the queuing delay (time to a new slot)."),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    """Register [vnf] on ``conf`` (idempotent: a second call, or one on a ConfigOpts that has
    the group already, e.g. nova-compute's global CONF, changes nothing)."""
    register_group(conf, vnf_group, vnf_opts)


def list_opts():
    """Entry point for oslo-config-generator (namespace ``fluidvim.vnf``)."""
    return [(vnf_group, vnf_opts)]


def default_kernel() -> str:
    return _first_present(PACKAGED_KERNEL, SOURCE_KERNEL, INSTALLED_KERNEL)


def default_vhost_net() -> str:
    return _first_present(PACKAGED_VHOST_NET, SOURCE_VHOST_NET, INSTALLED_VHOST_NET)


def _first_present(packaged: str, source: str, installed: str) -> str:
    """The wheel's image, else the source-tree build, else the distro path; none there: the
    source-tree path (the error then says to run make)."""
    for path in (packaged, source, installed):
        if os.path.exists(path):
            return path
    return source
